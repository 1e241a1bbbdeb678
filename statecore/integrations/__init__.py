"""Framework integrations, one package per framework, each behind its own optional extra.

``import statecore`` never imports a framework: only ``statecore.integrations.<framework>``
does, and it says which extra to install when the framework is missing.
"""
