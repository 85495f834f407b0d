"""Small shared kernels every layer may use: ids, token counting, compression, availability,
the cache backend, the JSON error shape, log redaction, mail, client addresses, metrics."""
