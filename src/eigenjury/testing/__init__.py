"""Test doubles shipped with the package: an OpenAI/Anthropic-compatible fault-injecting
server (loopback only) for tests and benchmarks."""
