"""Logs that name their session and turn, statecore's metrics, and tracing."""
