"""personas

Towns as data, one folder per town (`personas/smallville/`), each with three TOML files:

- `town.toml`: the location tree (area -> sub-area -> object with a state in words), opening
  hours, capacities and rules;
- `residents.toml`: the residents, each seeded by one paragraph of semicolon-separated phrases;
- `scenario.toml`: start time, tick length, the facts single residents know, timed events.

Load and check a town with `town.world.load.load_town("smallville")`; the schema lives in
`town.world.persona`.
"""
