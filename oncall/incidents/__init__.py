"""Incidents: which alert instances one cause is behind (`docs/architecture.md` §3).

Pure: no I/O, no clock. `targets` reads what a checklist's failing steps implicate (a
Deployment, pods, a node, a GPU, Redis) from their probes' parameters and facts; `grouping`
links instances that fire within a window of each other and implicate the same target (or that
Alertmanager grouped) into `oncall.model.incidents.Incident` values, with the reason in words;
`merge` folds a fresh grouping into the incidents already stored, keeping their ids.
`timeline`, `audit_events` and `postmortem` build an incident's timeline and its postmortem
draft from Prometheus' `ALERTS` history, the stored verdicts and the audit log.
"""
