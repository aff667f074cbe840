# fg-scenarios: the seed's scenarios in virtual time (README table).
TOOLS += bench/fg-scenarios.c
