"""What the tests and the perf measurements share: the tiny config (``tiny``), a small OpenAI-compatible
server with scripted faults (``fake_openai``) and the faults rehearsal (``rehearsal``). Not part
of the installed platform: importable from the checkout's root."""
