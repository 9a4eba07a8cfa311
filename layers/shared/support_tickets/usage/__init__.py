"""Usage and cost per tenant: the meter, the usage lines, the metering function, counters, prices, the report."""
