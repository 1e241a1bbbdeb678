"""Example activities (tools for the example ToolAgent); not part of the installed package.

statecore's own activities live in ``statecore.activities``."""
