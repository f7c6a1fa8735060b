/**
 * How a screen lays out at a phone's width and a desktop's: nothing wider
 * than the screen, no control hidden to the right in a box that scrolls,
 * and the screenshots of both widths in both schemes.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import type { Page } from "playwright-core"
import { assert } from "vitest"
import { screenshotDir, takingShots } from "./support.ts"

/**
 * The controls (buttons, links, fields) a person cannot see without
 * scrolling a box sideways: each one shown whose right edge passes the
 * window's, or that of a box around it that scrolls or clips (a table's
 * `.table-wrap`, whose scrolling the page-width check cannot see). One
 * wholly off to the left (a skip link until it is focused) or of a pixel
 * (read by screen readers only) is hidden on purpose.
 */
export const controlsOutOfView = (page: Page): Promise<Array<string>> =>
  page.evaluate(() => {
    const out: Array<string> = []
    for (const control of document.querySelectorAll("button, a[href], input, select, textarea, summary")) {
      if (!control.checkVisibility({ visibilityProperty: true })) continue
      const rect = control.getBoundingClientRect()
      if (rect.right <= 0 || (rect.width <= 1 && rect.height <= 1)) continue
      let right = document.documentElement.clientWidth
      for (let box = control.parentElement; box !== null; box = box.parentElement) {
        if (getComputedStyle(box).overflowX === "visible") continue
        right = Math.min(right, box.getBoundingClientRect().left + box.clientLeft + box.clientWidth)
      }
      if (rect.right > right + 1) {
        const name = control.getAttribute("aria-label") ?? (control.textContent ?? "").trim().slice(0, 40)
        out.push(
          `${control.tagName.toLowerCase()} "${name}" ends at ${Math.round(rect.right)} px, its box at ${
            Math.round(right)
          } px`
        )
      }
    }
    return out
  })

/** Fails when a control is out of view sideways (`controlsOutOfView`) on the current screen. */
export const assertControlsInView = async (page: Page, what: string) => {
  const width = page.viewportSize()?.width
  assert.deepStrictEqual(await controlsOutOfView(page), [], `${what} at ${width} px hides controls to the right`)
}

/**
 * Full-page screenshots of the current screen at 1280 and 390 px wide, in
 * the light and the dark scheme (`<name>-<width>-<scheme>.png`), into
 * `SVC_SHOTS_DIR` when set (to look at them outside the checkout), else
 * the screenshot directory (none with `SVC_BROWSER_SHOTS=0`). At each,
 * nothing may be wider than the screen
 * and no control hidden to the right in a box that scrolls
 * (`assertControlsInView`). The page is left at 1280 px, light.
 */
export const screenshots = async (page: Page, name: string) => {
  const dir = process.env.SVC_SHOTS_DIR ?? screenshotDir
  fs.mkdirSync(dir, { recursive: true })
  for (const colorScheme of ["light", "dark"] as const) {
    for (const width of [1280, 390]) {
      await page.emulateMedia({ colorScheme })
      await page.setViewportSize({ width, height: 900 })
      // Nothing may push the page wider than the screen (a table scrolls inside its own box).
      const wide = await page.evaluate(() => document.documentElement.scrollWidth)
      const culprits = wide <= width ? [] : await page.evaluate((limit) =>
        [...document.querySelectorAll("body *")]
          .filter((node) => node.getBoundingClientRect().right > limit && !node.parentElement?.closest(".table-wrap"))
          .concat([...document.querySelectorAll(".table-wrap")].filter((node) =>
            node.scrollWidth > node.clientWidth && getComputedStyle(node).overflowX !== "auto"
          ))
          .slice(-3)
          .map((node) =>
            `${node.tagName.toLowerCase()}.${node.className}: ${node.textContent?.slice(0, 60)}`
          ), width)
      assert.isAtMost(wide, width, `${name} is ${wide} px wide at ${width} px: ${culprits.join("; ")}`)
      await assertControlsInView(page, name)
      if (takingShots) {
        await page.screenshot({ path: path.join(dir, `${name}-${width}-${colorScheme}.png`), fullPage: true })
      }
    }
  }
  await page.emulateMedia({ colorScheme: "light" })
  await page.setViewportSize({ width: 1280, height: 900 })
}
