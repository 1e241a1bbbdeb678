"""The Temporal outer ring: the plugin, the client, the worker, the dev server, the data
converter and the connection settings. It assembles the other rings."""
