#!/bin/sh
# firewalld (Fedora, RHEL, openSUSE): only the listed client networks may reach lmd (11434) and
# its gateway (11443). Rich rules in the default zone; other sources never match them, and the
# ports are not opened otherwise, so they stay closed to everyone else.
# Run as root once. Change: the networks, the zone (firewall-cmd --get-default-zone) and the
# ports. Check: firewall-cmd --list-rich-rules
set -eu

zone=$(firewall-cmd --get-default-zone)
for net in 192.168.1.0/24 10.8.0.0/24; do
    for port in 11434 11443; do
        firewall-cmd --permanent --zone="$zone" --add-rich-rule="rule family=ipv4 source address=$net port port=$port protocol=tcp accept"
    done
done
# An IPv6 network, the same way:
# firewall-cmd --permanent --zone="$zone" --add-rich-rule='rule family=ipv6 source address=fd00:1234:5678::/48 port port=11434 protocol=tcp accept'
firewall-cmd --reload
