"""The operators layer: custom operators (resources, launch protocol, Work) and the built-in
collectives, attached to the communicator from here."""
