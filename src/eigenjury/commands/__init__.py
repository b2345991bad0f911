"""The subcommands of `eigenjury`. Each module declares its own (`register`) and
imports what a handler needs only when it runs, so `eigenjury batch` never loads
scipy. A new command is a module here, added to COMMANDS."""

from eigenjury.commands import agreement, bounds, calls, contracts, peer, view

COMMANDS = (peer, agreement, calls, contracts, bounds, view)
