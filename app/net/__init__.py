"""Outbound network access that is safe to point at untrusted addresses."""
