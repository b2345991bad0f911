"""Providers: one class per wire protocol, all behind `eigenjury.models.types.Provider`."""
