#!/bin/bash
cat /etc/debian_version > /root/debian-version.txt
