#!/bin/sh
# ufw: only the listed client networks may reach lmd (11434) and its gateway (11443).
# Run as root once; the rules persist. Change: the networks, and drop the 11443 lines if you do
# not run `lmd gateway` (or drop 11434 when clients must come through the gateway only).
# ufw applies rules in the order they were added: the allows below come before the denies.
# Check: ufw status numbered
set -eu

for net in 192.168.1.0/24 10.8.0.0/24; do
    ufw allow from "$net" to any port 11434 proto tcp comment 'lmd'
    ufw allow from "$net" to any port 11443 proto tcp comment 'lmd gateway'
done
# Everyone else: refused, even if the default incoming policy is "allow".
ufw deny 11434/tcp comment 'lmd: others'
ufw deny 11443/tcp comment 'lmd gateway: others'
ufw enable
