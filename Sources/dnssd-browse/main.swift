print("dnssd-browse: being written")
