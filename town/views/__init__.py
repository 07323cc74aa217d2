"""What only reads the town: the map, a resident's card, who is where, a look at a place.

Apart from ``town/inputs`` (which change the town, or write their audit row) so that the layout
says which code may wait and which never does: a view reads committed state in one short read
transaction of its own and takes no lock, whatever a tick is doing (it holds none while it
thinks, and SQLite in WAL mode lets readers read while a writer writes)."""
