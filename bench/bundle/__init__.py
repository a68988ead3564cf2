"""A result anyone can verify: the result bundle, its signature, and its verification (docs/acceptance.md).

A bundle is one zip file holding what a result rests on (bench.bundle.evidence: the run, the
resolved gold, the served atoms' places without their text, the options and the claimed
metrics), an in-toto Statement whose subject lists every member's sha256 (bench.bundle.statement),
and an Ed25519 signature over the Statement's RFC 8785 canonical JSON (bench.bundle.signing).
`bench verify` (bench.bundle.verify) checks the signature with a key the verifier gives, every
member's digest, and recomputes every number from the bundled run with the installed harness."""
