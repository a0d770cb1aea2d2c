// Unicast DNS-SD client (being written).
