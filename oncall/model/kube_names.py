"""What Kubernetes accepts as an object name, for parameters that become part of a request.

A name that goes into a field selector (`spec.nodeName=NODE`) comes from an alert's labels: a
label holding `n-1,metadata.name=x` would add a term of its own and narrow the list to nothing,
and a check that counts failing pods would read "all well". Checked here, such a value makes
the step's parameters invalid (the step says so) instead of changing what is asked.
"""

from __future__ import annotations

#: A lowercase RFC 1123 subdomain (pods, nodes, Deployments), as the API server validates
#: `metadata.name` (apimachinery IsDNS1123Subdomain); its 253 characters are `NAME_MAX`.
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NAME_MAX = 253

#: A lowercase RFC 1123 label (namespaces, container names), as the API server validates them
#: (apimachinery IsDNS1123Label / ValidateNamespaceName, ValidateContainer): at most `LABEL_MAX`.
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
LABEL_MAX = 63

#: Any object's name in a field selector: no `,` `=` `!` `\` (the selector's own syntax) and
#: no `/` `%` (not a path segment name, apimachinery IsValidPathSegmentName), at most 253.
FIELD_NAME = r"^[^,=!\\/%\s]{1,253}$"
