#!/bin/bash
printf falcon > /root/first.txt
