"""The ground floor: what every layer may use (errors, audio constants, text helpers, process memory)."""
