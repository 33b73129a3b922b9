import { readFileSync } from "fs";
const data = JSON.parse(readFileSync("/dev/stdin", "utf-8"));
const output: string = data.output ?? "";
const checks: Array<{ text: string; pass: boolean; reason: string }> = [];
if (output.includes("42")) {
  checks.push({ text: "Output contains correct value (42)", pass: true, reason: "42 appears in the output" });
} else {
  checks.push({ text: "Output contains correct value (42)", pass: false, reason: "42 is missing from the output" });
}
const passed = checks.filter(check => check.pass).length;
console.log(JSON.stringify({
  pass: passed === checks.length,
  score: checks.length === 0 ? 0.0 : passed / checks.length,
  reason: `${passed}/${checks.length} checks passed`,
  checks,
}));
