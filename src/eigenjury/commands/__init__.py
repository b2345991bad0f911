"""The subcommands of `eigenjury`. Each module declares its own (`register`) and
imports what a handler needs only when it runs, so `eigenjury batch` never loads
scipy. A new command is a module here, added to COMMANDS."""

from eigenjury.commands import bounds, calls, contracts, peer, view

COMMANDS = (peer, calls, contracts, bounds, view)
