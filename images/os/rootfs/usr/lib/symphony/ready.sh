#!/bin/sh
# Print the installed OS's ready line on the serial console (images/os; the emulator's BootProgress reads it).
addrs=$(ip -4 -o addr show scope global | awk '{print $4}' | tr '\n' ' ')
echo "symphony-os $(cat /etc/symphony/os-image-id): ready ($addrs)" > /dev/ttyS0
