"""What people do to a town from outside, each input one unit of work (``unit.py``): a visitor
joins and speaks (``visitor.py``), an admin whispers, sets an object or the clock
(``admin.py``), anyone asks (``query.py``). Every platform, and the shell, goes through these
same functions. A place may have a handler of its own (``handlers.py``); ``limits.py`` keeps
visitors and channels to their rates.
"""
