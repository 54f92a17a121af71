"""The tamper-evident audit log (docs/audit.md): hash-chained JSONL records, verified.

`records` holds the record type, hashing and redaction; `log` the file (append, read, verify);
`chain` the verdict on a chain; `anchor` the team Stream's copies and the cross-check against
them (read-only: XRANGE, XINFO); `query` the reviewers' filters and exports. Writing a copy to
the Stream (XADD) is the remediation layer's (`remediation/audit_mirror.py`): only it may call
a mutating backend method.
"""
