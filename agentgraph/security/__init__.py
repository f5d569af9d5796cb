"""Trust boundaries: approvals, permissions, redaction, workspace settings, confinement."""
