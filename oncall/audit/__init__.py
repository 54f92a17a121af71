"""The tamper-evident audit log (DESIGN §4 "Audit"): hash-chained JSONL records, verified.

`records` holds the record type, hashing and redaction; `log` the file (append, read, verify);
`query` the reviewers' filters and exports. Mirrors (Redis Stream, Kubernetes Event) are
callables injected by the remediation layer; nothing here talks to a backend.
"""
