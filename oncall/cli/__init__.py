"""The command line: argument parsing and one small module per command.

Importing this package must stay cheap: `oncall --help` loads neither textual nor kubernetes,
and each command imports what it needs when it runs.
"""
