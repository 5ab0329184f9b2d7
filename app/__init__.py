"""Relay: live interpretation for meetings."""

__version__ = "0.1.0"
