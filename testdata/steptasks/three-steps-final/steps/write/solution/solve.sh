#!/bin/bash
echo one > /root/state.txt
