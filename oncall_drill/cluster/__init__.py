"""The drill's cluster: the Kubernetes API simulator whose pods are real vLLM simulator
processes, a Service proxy in front of the ready pods, Prometheus file-based discovery of
the pods, and kube-state-metrics-style series about them."""
