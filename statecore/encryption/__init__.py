"""AES-256-GCM payload encryption (``codec``) and the codec server for the Web UI.

Needs the optional ``encryption`` extra (the cryptography package)."""
