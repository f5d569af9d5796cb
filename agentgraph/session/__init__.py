"""The session service: operations over an ``Agent`` and its ``Store`` for front ends."""
