"""Releases: the registry client, what ``latest`` means tonight, and how a new release fares against the previous one."""
