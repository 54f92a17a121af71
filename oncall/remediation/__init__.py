"""Human-confirmed remediations: the guards, preview, confirmation and execution of actions."""
