"""Golden alerts: rule packs loaded strictly, and live alert states from two sources.

- `loader`: Prometheus rule files → `AlertRule`s, every problem with file:line:col;
- `local_eval`: the `for` / `keep_firing_for` state machine with Prometheus' semantics, for
  rules that are not deployed to Prometheus;
- `prom_source`: states of deployed rules from `/api/v1/rules`, one request per refresh;
- `engine`: picks the source per rule, keeps last known states when a source fails.
"""
