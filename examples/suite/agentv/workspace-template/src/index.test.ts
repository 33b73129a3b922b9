import { expect, test } from "bun:test";
import { add, reverse } from "./index";

test("add", () => {
  expect(add(2, 3)).toBe(5);
});

test("reverse", () => {
  expect(reverse("abc")).toBe("cba");
});
