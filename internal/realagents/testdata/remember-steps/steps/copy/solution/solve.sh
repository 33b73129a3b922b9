#!/bin/bash
cp /root/first.txt /root/copy.txt
