"""No secret in a log, report or artifact: one place that knows what a secret looks like.

- redact: secret-looking names and values (tokens, private keys, JWTs, URL passwords), nccl-tests -J
  JSON (it embeds the whole environment), known secret values in any text
- scrub: every file of a run dir, once the run is over
"""
