// Admin HTTP endpoint (being written).
