"""Framework integrations: one package and optional extra each; statecore never imports them."""
