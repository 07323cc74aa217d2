"""Members decide what the town keeps of them: ``forget`` (every place a member's data lives,
listed once in ``places.REGISTRY``), the forget orders that finish after a crash, and the
forget-on-leave rule for bans, kicks and departures. Muting and the channel switches are in
``town.inputs.consent`` and ``town.outbox.switches`` (the visitor path and the outbox call them)."""
